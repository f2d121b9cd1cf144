"""A pool's line of waiting wakes: the fair order, kept with a scheduling gate."""
