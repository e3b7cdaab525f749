"""Helpers shared by the tests: an independent statement of the rules, raw bots, wire tools."""
