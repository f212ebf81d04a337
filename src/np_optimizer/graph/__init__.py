"""Exported programs: saving and loading .pt2, output-preserving passes, static statistics (torch imported lazily)."""
