"""Reclaiming an idle seat for a waiting wake."""
