"""Example flintlock programs (TPC-H queries, nycflights13, word count) and their data generator."""
