"""One self-contained HTML file: the Vega, Vega-Lite and vega-embed JavaScript inlined (from
vl-convert's bundle), each chart's spec inlined as JSON; it opens from disk, offline.

The page checks itself: script errors (``window.onerror``, unhandled rejections, a chart
that fails to embed) and Vega warnings are written into ``#sb-errors`` and ``#sb-warnings``
(shown when not empty), and each chart container gets ``data-rendered="yes"`` and the
number of marks drawn in ``data-marks`` once it rendered. Tests read these from the DOM.
"""

import html
import json
from dataclasses import dataclass

import altair as alt
import vl_convert

#: vl-convert bundles these Vega-Lite versions: the one Altair writes specs for.
VEGA_LITE = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1500px;
       padding: 0 1.5em 3em; color: #222; }
h1 { margin-bottom: .2em; } h2 { margin-top: 2.2em; border-bottom: 1px solid #ddd; }
nav a { margin-right: 1em; }
.sb-note { color: #8a5300; } .sb-empty { color: #666; font-style: italic; }
.sb-chart { margin: 1em 0 2em; min-height: 60px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
tr:target { background: #fff3c4; }
code { font-size: 12px; }
#sb-errors, #sb-warnings { padding: .6em; white-space: pre-wrap; }
#sb-errors { background: #fde2e2; } #sb-warnings { background: #fff6d6; }
#sb-errors:empty, #sb-warnings:empty { display: none; }
"""

# Before anything else runs: record every script error, even one in the bundle.
RECORDER = """
window.sbRecord = function (kind, message) {
  (window.sbLog = window.sbLog || []).push([kind, String(message)]);
  var box = document.getElementById(kind === 'error' ? 'sb-errors' : 'sb-warnings');
  if (box) { box.textContent += String(message) + '\\n'; }
};
window.addEventListener('error', function (e) {
  sbRecord('error', 'script error: ' + e.message + ' (' + e.filename + ':' + e.lineno + ')');
});
window.addEventListener('unhandledrejection', function (e) {
  sbRecord('error', 'unhandled rejection: ' + (e.reason && e.reason.stack || e.reason));
});
"""

# Embed every chart; mark its container rendered with the number of marks drawn.
EMBED = """
(function () {
  function logger(id) {
    var level = 0;
    function say(kind) {
      return function () {
        sbRecord(kind, id + ': ' + [].join.call(arguments, ' '));
        return this;
      };
    }
    function quiet() { return this; }
    return {
      level: function (l) { if (l === undefined) { return level; } level = l; return this; },
      error: say('error'), warn: say('warning'), info: quiet, debug: quiet
    };
  }
  document.querySelectorAll('.sb-chart').forEach(function (box) {
    var spec;
    try {
      spec = JSON.parse(document.getElementById(box.id + '-spec').textContent);
    } catch (err) {
      box.dataset.rendered = 'error';
      sbRecord('error', box.id + ': spec is not JSON: ' + err);
      return;
    }
    vegaEmbed(box, spec, {
      renderer: 'svg', logLevel: 2 /* vega.Warn */, logger: logger(box.id),
      actions: {export: true, source: true, compiled: false, editor: false}
    }).then(function (result) {
      return result.view.runAsync().then(function () {
        var marks = box.querySelectorAll('.role-mark > *').length;
        box.dataset.marks = String(marks);
        box.dataset.rendered = marks > 0 ? 'yes' : 'empty';
        if (!marks) { sbRecord('error', box.id + ': rendered no marks'); }
      });
    }).catch(function (err) {
      box.dataset.rendered = 'error';
      sbRecord('error', box.id + ': ' + (err && err.stack || err));
    });
  });
})();
"""


@dataclass
class Block:
    """A part of the page: a heading, HTML text, chart specs (Vega-Lite dicts)."""

    anchor: str
    title: str
    body_html: str
    specs: list


def script_json(value):
    """JSON safe inside a <script> element (no "</script>", no "<!--")."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def javascript_bundle():
    """Vega, Vega-Lite and vega-embed as one script that needs nothing from the network."""
    return vl_convert.javascript_bundle(vl_version=VEGA_LITE).replace("</script", "<\\/script")


def assemble(title, header_html, blocks, footer_html=""):
    """The whole page; returns (html text, ids of the chart containers in order)."""
    parts, ids = [], []
    nav = " ".join(
        f'<a href="#{html.escape(b.anchor)}">{html.escape(b.title)}</a>' for b in blocks
    )
    for block in blocks:
        parts.append(f'<section id="{html.escape(block.anchor)}">')
        parts.append(f"<h2>{html.escape(block.title)}</h2>{block.body_html}")
        for spec in block.specs:
            chart_id = f"chart-{len(ids) + 1}"
            ids.append(chart_id)
            parts.append(f'<div class="sb-chart" id="{chart_id}" data-rendered="no"></div>')
            parts.append(
                f'<script type="application/json" id="{chart_id}-spec">{script_json(spec)}'
                "</script>"
            )
        parts.append("</section>")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="sitebench-charts" content="{len(ids)}">
<title>{html.escape(title)}</title>
<style>{CSS}</style>
<script>{RECORDER}</script>
</head>
<body>
<pre id="sb-errors"></pre>
<pre id="sb-warnings"></pre>
{header_html}
<nav>{nav}</nav>
{"".join(parts)}
{footer_html}
<script>{javascript_bundle()}</script>
<script>{EMBED}</script>
</body>
</html>
"""
    return page, ids
