"""The lines of kappa's SVG plots (``orchestrator.analysis.plots``) and their colours."""

from __future__ import annotations

import re

# A line is a <g id="..."> around one <path> whose style names its stroke colour.
LINE = re.compile(r'<g id="((?:run|mean)\|[^"]+)">\s*<path [^>]*?stroke: (#[0-9a-f]{6})')


def line_colors(svg: str) -> dict[str, str]:
    """SVG id of each line (``plots.line_id``: ``run|metric|group|cell``,
    ``mean|metric|group|facet``) -> its stroke colour."""
    return dict(LINE.findall(svg))
