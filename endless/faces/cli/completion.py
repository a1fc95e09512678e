"""``endless completion bash|zsh|fish``: shell completion drawn from the command's own parser.

The script knows the command names (so the first word completes at once);
past the first word it asks ``endless completion words -- WORDS…``, which
builds only that command's parser and lists what may come next: its
subcommands, its options, an option's choices.  So completion never goes
stale after an upgrade and never loads more than the command being typed (no
simulator, SDK or web server for ``endless view --<TAB>``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

TOP_OPTIONS = ("--help", "--version")
SHELLS = ("bash", "zsh", "fish")


def add_completion_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)",
        description=("Print a completion script for the shell; load it from the shell's startup file: "
                     "~/.bashrc, ~/.zshrc (after compinit), or for fish `endless completion fish | source` "
                     "in ~/.config/fish/config.fish."),
        epilog="example:\n  eval \"$(endless completion bash)\"    # in ~/.bashrc",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shell", metavar="SHELL", choices=(*SHELLS, "words"),
                        help="bash, zsh or fish (`words -- WORD…`, for the scripts: what may follow the words "
                             "typed after `endless`, one candidate a line)")
    parser.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(run=_completion_command)


def _completion_command(args: argparse.Namespace) -> int:
    names: list[str] = list(args.command_names)
    if args.shell == "words":
        for candidate in candidates(args.parser_for, names, args.words or [""]):
            sys.stdout.write(candidate + "\n")
        return 0
    sys.stdout.write(SCRIPTS[args.shell](names))
    return 0


# -- what may come next ------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse keeps its arguments here; there is no public list
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def _positional_choices(parser: argparse.ArgumentParser) -> list[str]:
    return [str(c) for action in parser._actions
            if not action.option_strings and action.choices and not isinstance(action, argparse._SubParsersAction)
            for c in action.choices]


def candidates(parser_for: Callable[[str | None], argparse.ArgumentParser], names: list[str],
               words: list[str]) -> list[str]:
    """What may replace the last of ``words`` (the words after ``endless``), from the parser itself."""
    current, before = words[-1], words[:-1]
    command = next((w for w in before if not w.startswith("-")), None)
    if command is None:
        pool = list(TOP_OPTIONS) if current.startswith("-") else names
        return [c for c in pool if c.startswith(current)]
    parser: argparse.ArgumentParser | None = _subcommands(parser_for(command)).get(command)
    if parser is None:
        return []
    for word in before[before.index(command) + 1:]:  # nested commands: `hermes install`, `sim serve`
        parser = _subcommands(parser).get(word, parser)
    options = _options(parser)
    previous = options.get(before[-1]) if before else None
    if previous is not None and previous.nargs != 0:  # the value of an option
        return [str(c) for c in previous.choices or () if str(c).startswith(current)]
    if current.startswith("-"):
        pool = [o for o in options if o.startswith("--") or o == "-h"]
    else:
        pool = list(_subcommands(parser)) + _positional_choices(parser)
    return [c for c in pool if c.startswith(current)]


# -- the scripts ---------------------------------------------------------------------------------


def bash_script(names: list[str]) -> str:
    return f"""# bash completion for endless (from `endless completion bash`)
_endless_complete() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}}
    if [[ $COMP_CWORD -eq 1 && $cur != -* ]]; then
        COMPREPLY=($(compgen -W "{' '.join(names)}" -- "$cur"))
        return 0
    fi
    local IFS=$'\\n'
    COMPREPLY=($(endless completion words -- "${{COMP_WORDS[@]:1:COMP_CWORD}}" 2>/dev/null))
}}
complete -o default -F _endless_complete endless
"""


def zsh_script(names: list[str]) -> str:
    return f"""#compdef endless
# zsh completion for endless (from `endless completion zsh`); load it after compinit
_endless() {{
    if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then
        compadd -- {' '.join(names)}
        return
    fi
    local -a found
    found=("${{(@f)$(endless completion words -- "${{(@)words[2,CURRENT]}}" 2>/dev/null)}}")
    if [[ -n ${{found[1]}} ]]; then
        compadd -- $found
    else
        _files
    fi
}}
compdef _endless endless
"""


def fish_script(names: list[str]) -> str:
    return f"""# fish completion for endless (from `endless completion fish`)
function __endless_complete
    set -l typed (commandline -opc) (commandline -ct)
    if test (count $typed) -eq 2; and not string match -q -- '-*' $typed[2]
        string join \\n {' '.join(names)} | string match -- "$typed[2]*"
        return
    end
    set -l found (endless completion words -- $typed[2..-1] 2>/dev/null)
    if test (count $found) -gt 0
        string join \\n $found
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c endless -f -a '(__endless_complete)'
"""


SCRIPTS: dict[str, Callable[[list[str]], str]] = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}
