"""The seat economy: idle seats reclaimed for waiting wakes, sleep windows, CPU activity,
and the fair order of waiting wakes."""
