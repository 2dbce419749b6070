"""The workload: its pydantic schema and the reading of JSON/YAML documents."""
