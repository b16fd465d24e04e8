"""Text from elsewhere (another site's toolchain names, check names, a remote's messages)
made safe to print: a terminal never receives its control characters (escape sequences
that move the cursor, rewrite the title, or hide a line), each is shown as ``\\xNN``."""

import re

#: C0 and C1 control characters, DEL, and Unicode's line and paragraph separators and
#: bidirectional overrides; newlines and tabs are the output's own layout.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def shown(text):
    """``text`` with every control character but newline and tab spelled out."""
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        str(text),
    )
