"""Shared by every stage: the one error type, where things live, safe names, atomic files."""
