"""The seat economy: reclaiming an idle seat for a waiting wake, sleep windows, CPU activity."""
