"""The data set: loading and checking it, full-content hashes, and the pin that catches silent growth."""
