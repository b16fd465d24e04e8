"""Warnings about one site said as one line, with a count: a site with 10,000 broken runs
costs every compare, report and pull one line, not 10,000 (the first one says what)."""

import re

#: The site a warning names: "site/run ..." or "skipped site/run ...".
_SITE = re.compile(r"(?:skipped )?([A-Za-z0-9][A-Za-z0-9._-]{0,63})/")


def site_of(message):
    match = _SITE.match(message)
    return match.group(1) if match else None


class BySite:
    """A ``warn`` that holds the messages about each site until :meth:`flush`, then says
    one line per site. ``site`` set: every message is about it; otherwise the site is read
    from the message, and a message naming none is said at once."""

    def __init__(self, warn, site=None, grouped=True):
        self.warn, self.site, self.held, self.grouped = warn, site, {}, grouped

    def __call__(self, message):
        site = self.site or site_of(message)
        if site is None or not self.grouped:
            self.warn(message)
        else:
            self.held.setdefault(site, []).append(message)

    def flush(self):
        for site, messages in self.held.items():
            self.warn(one_line(site, messages))
        self.held = {}


def one_line(site, messages, what="warnings"):
    """The line for ``messages`` about ``site``: the message itself when there is one."""
    if len(messages) == 1:
        return messages[0]
    return f"{site}: {len(messages)} {what}, the first: {messages[0]}"


def refused_by_site(refusals):
    """{site: ["commit <12 hex> refused: <reason>", ...]} of refused commits
    [(site, commit, reason)], in order: what :func:`one_line` says one line per site."""
    by_site = {}
    for site, commit, reason in refusals:
        by_site.setdefault(site, []).append(f"commit {commit[:12]} refused: {reason}")
    return by_site
