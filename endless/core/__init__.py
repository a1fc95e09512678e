"""The core: the memory on disk, the view, search and the three look-back tools (DESIGN §2, §5).

It imports no other layer of Endless, no SDK and no web framework.
"""
