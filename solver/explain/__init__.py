"""Explanations: why no fleet fits (diagnose), and the alternatives a plan did not take."""
