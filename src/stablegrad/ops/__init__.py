"""The op families.  Each module holds one family, forward and derivative side by side."""
