"""The planner's answer as data (result.py) and as a table (render.py)."""
