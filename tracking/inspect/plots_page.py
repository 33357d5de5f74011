"""The page `dvc plots show` renders into, with Vega, Vega-Lite and Vega-Embed inside it, so the charts draw offline.

DVC's own page loads the three libraries from a CDN and is blank without a network. `tracking plots-page` (which
`make run` and `make test` call) writes this page from the libraries the `vl-convert-python` package ships and names
it in the clone's own `.dvc/config.local` (`plots.html_template`, resolved under `.dvc/`), both git-ignored. The
committed `.dvc/config` names no page: a clone set up without `make` had it name a page it lacked, which DVC read
as the template's text and refused (`HTML template has to contain '{plot_divs}'`); it draws with DVC's own page.
"""

from __future__ import annotations

from pathlib import Path

# Where the page is written, under `.dvc/` (as `plots.html_template` in .dvc/config.local names it); git-ignored.
PLOTS_PAGE = Path("plots/offline.html")
# The placeholders DVC fills: the charts, and the auto-refresh tag of `dvc plots show --open`'s live mode.
PLOT_DIVS, REFRESH_TAG = "{plot_divs}", "{refresh_tag}"


def plots_page() -> str:
    """The page: the libraries inline, then DVC's charts; DVC's `{scripts}` (the CDN tags) is left out."""
    import vl_convert

    bundle = vl_convert.javascript_bundle()
    # DVC fills the page with str.replace: a placeholder inside the bundle would be replaced too.
    if PLOT_DIVS in bundle or REFRESH_TAG in bundle:
        raise RuntimeError(f"vl-convert's Vega bundle holds DVC's placeholder {PLOT_DIVS} or {REFRESH_TAG}")
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        f"    {REFRESH_TAG}\n    <title>DVC Plot</title>\n"
        f"    <script>\n{bundle}\n    </script>\n"
        "    <style>\n        table { border-spacing: 15px; }\n    </style>\n"
        f"</head>\n<body>\n    {PLOT_DIVS}\n</body>\n</html>\n"
    )


def write_plots_page(dvc_dir: Path) -> Path:
    """Write the page under the project's `.dvc/` folder, name it in this clone's `.dvc/config.local` (the page
    and the setting exist together, or neither), and return its path."""
    from dvc.config import Config

    path = dvc_dir / PLOTS_PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plots_page(), encoding="utf-8")
    with Config(dvc_dir=str(dvc_dir)).edit("local") as config:
        config.setdefault("plots", {})["html_template"] = PLOTS_PAGE.as_posix()
    return path
