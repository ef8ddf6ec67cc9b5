"""The dashboard's line views: banner, key bar, GPU board, process table, and what they
draw with (strips, the palette of roles, the sanitizer's Text, formats, the first frame).
"""
