"""Print a bash completion script for ./sitebench, generated from its parsers: every
command, subcommand, option and choice, and site names from site-configs/ where a command
takes a site. It follows the parsers, so a new command or option completes with no edit here.

  source <(./sitebench completion bash)                 # this shell
  ./sitebench completion bash > ~/.local/share/bash-completion/completions/sitebench"""

import argparse
import shlex

from sitebench.cli.common import subcommands

description = "print a bash completion script generated from the parsers"

section = "maintenance"

example = """
  source <(./sitebench completion bash)         # complete ./sitebench in this shell
  ./sitebench completion bash > ~/.local/share/bash-completion/completions/sitebench
"""

#: Arguments whose values are site names (positional dests and options).
SITE_ARGUMENTS = {"site", "sites", "a", "b", "--site"}


def setup_parser(p):
    p.add_argument("shell", choices=("bash",), help="the shell (bash; zsh: bashcompinit)")


def command(args):
    from sitebench.cli import PASSTHROUGH, parser

    print(bash_script(parser(), set(PASSTHROUGH) | {"qemu-shell"}))
    return 0


def walk(parser, path=()):
    """(path, parser) for the top parser and every subcommand below it."""
    yield path, parser
    for name, sub in subcommands(parser).items():
        yield from walk(sub, path + (name,))


def _words(parser):
    """What may be typed next at this level: subcommands, options, positional choices."""
    words = list(subcommands(parser))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        words.extend(action.option_strings)
        if not action.option_strings and action.choices:
            words.extend(action.choices)
    return words


def _takes_sites(parser):
    return any(
        not a.option_strings and a.dest in SITE_ARGUMENTS and not a.choices
        for a in parser._actions
    )


def _values(parser):
    """option -> its choices, or None (a value: left to bash's file completion), for the
    options that take a value."""
    values = {}
    for action in parser._actions:
        if action.option_strings and action.nargs != 0:
            for option in action.option_strings:
                values[option] = list(action.choices) if action.choices else None
    return values


def _quote(words, then=""):
    """The words in double quotes (then: a command substitution to add)."""
    text = " ".join(str(w) for w in words)
    assert not set(text) & set('"$`\\'), text  # option names and choices only
    return f'"{text}{then}"'


def bash_script(top, passthrough):
    paths, levels, values = [], [], []
    for path, parser in walk(top):
        key = " ".join(path)
        if path:
            paths.append(shlex.quote(key))
        if key in passthrough:
            levels.append(f"        {shlex.quote(key)}) return ;;")
            continue
        sites = " $(_sitebench_sites)" if _takes_sites(parser) else ""
        levels.append(f"        {shlex.quote(key)}) words={_quote(_words(parser), sites)} ;;")
        for option, choices in _values(parser).items():
            case = shlex.quote(f"{key}|{option}")
            if option in SITE_ARGUMENTS:
                values.append(f"        {case}) words=$(_sitebench_sites) ;;")
            elif choices:
                values.append(f"        {case}) words={_quote(choices)} ;;")
            else:
                values.append(f"        {case}) return ;;")
    return "\n".join(
        [
            "# bash completion for ./sitebench, generated from its parsers by",
            "# `./sitebench completion bash`; regenerate it after an update.",
            "_sitebench_sites() {",
            "    local dir=.",
            "    [[ ${COMP_WORDS[0]} == */* ]] && dir=${COMP_WORDS[0]%/*}",
            "    [[ -d $dir/site-configs ]] || return 0",
            '    (cd "$dir/site-configs" && for d in */; do echo "${d%/}"; done)',
            "}",
            "_sitebench() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}",
            '    local path="" word words i',
            "    COMPREPLY=()",
            "    # the command path typed so far: words that name a (sub)command",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            "        word=${path:+$path }${COMP_WORDS[i]}",
            "        case $word in",
            f"            {'|'.join(paths)}) path=$word ;;",
            "        esac",
            "    done",
            "    # the value of an option: its choices, site names, or files (bash's default)",
            '    case "$path|$prev" in',
            *values,
            "        *) words=unset ;;",
            "    esac",
            "    if [[ $words == unset ]]; then",
            "        case $path in",
            *levels,
            "        esac",
            "    fi",
            '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            "}",
            "complete -o default -F _sitebench sitebench",
        ]
    )
