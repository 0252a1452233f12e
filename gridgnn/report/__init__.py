"""Pictures of a finished run: the series a metrics file holds (`series`), drawn with matplotlib (`figures`)
into one PNG or a self-contained HTML page (`page`). Used by ``gridgnn report``. Not collective."""
