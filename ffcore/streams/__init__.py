"""Attempt output streams: reads, frame parsing and the live tail."""
