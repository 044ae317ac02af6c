"""The compatibility suite with real tools (issue 14): see conftest.py."""
