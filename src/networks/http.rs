//! Shared HTTP handling for every network (written in a later step).
