"""The real interactive ``hermes`` (prompt_toolkit) in a pseudo-terminal, for the e2e tests: type, read the screen.

``Screen(env)`` starts ``hermes`` in the env's workspace in a fixed window
(``TERM=xterm-256color``, the env's Hermes home) and feeds everything it
writes to a terminal emulator (``pyte``), so the tests read the screen the
person would see, scrolled-off lines included, not the stream of redraws.
Two things a real terminal does matter here: prompt_toolkit asks where the
cursor is (``ESC[6n``) and reads no keys until it is answered (the emulator
answers it); Hermes asks the terminal's background colour (OSC 11) once and
discards what was typed meanwhile, so ``HERMES_TUI_THEME=dark`` answers that
beforehand.

Waits are for text on that screen, with a timeout (pexpect's
``read_nonblocking``), never sleeps.  Matching folds each run of white space
to one space: Rich wraps long lines inside its boxes.
"""

from __future__ import annotations

import re
import time

import pexpect
import pyte

from hermes_env import Env, HERMES_PYTHON, HERMES_TIMEOUT

ROWS, COLUMNS = 40, 120
HISTORY_LINES = 20_000
PROMPT = "❯"
REPLY_LABEL = "⚕ Hermes"
STATUS_BAR = re.compile(r"⚕ \S+ │")  # the first line of the prompt area: "⚕ sim-model │ 0/65.5K │ ..."
START_TIMEOUT = 90.0
ZERO_WIDTH = re.compile("[\u200b-\u200f\ufe00-\ufe0f]")


def folded(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class Screen:
    """One interactive ``hermes`` launch; ``args`` after ``hermes`` (e.g. ``["--resume", sid]``)."""

    def __init__(self, env: Env, args: list[str] | None = None, extra_env: dict | None = None) -> None:
        variables = env.env({"TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS),
                             "HERMES_TUI_THEME": "dark", **(extra_env or {})})
        self.terminal = pyte.HistoryScreen(COLUMNS, ROWS, history=HISTORY_LINES, ratio=0.5)
        self.stream = pyte.Stream(self.terminal)
        self.child = pexpect.spawn(str(HERMES_PYTHON), ["-c", "import sys; from hermes_cli.main import main; "
                                   "sys.argv[0] = 'hermes'; sys.exit(main())", *(args or [])],
                                   env=variables, cwd=str(env.workspace), dimensions=(ROWS, COLUMNS),
                                   encoding="utf-8", codec_errors="replace", timeout=HERMES_TIMEOUT)
        self.terminal.write_process_input = self.child.send  # the emulator's answers (cursor position)
        self.log = open(env.tmp / f"screen-{len(list(env.tmp.glob('screen-*.log')))}.log", "w")
        self.child.logfile_read = self.log  # what Hermes wrote, escapes and all (a failed test's evidence)
        self.wait_for(PROMPT, START_TIMEOUT)

    # -- reading -------------------------------------------------------------------

    def lines(self) -> list[str]:
        """Every line the screen showed, oldest first: the ones scrolled off the top, then the window."""
        def row(line) -> str:
            return "".join(line[x].data for x in range(COLUMNS)).rstrip()
        return [row(line) for line in self.terminal.history.top] + self.terminal.display

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines())

    def after(self, anchor: str) -> str:
        """The screen after the last line holding ``anchor`` (folded), or '' when it is not there."""
        lines = self.lines()
        for index in range(len(lines) - 1, -1, -1):
            if anchor in lines[index]:
                return "\n".join(lines[index:])
        return ""

    def _read(self, timeout: float) -> bool:
        try:
            chunk = self.child.read_nonblocking(65536, timeout=max(0.01, timeout))
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        # pyte 0.8.2 drops the rest of a line after a zero-width character (Hermes prints "⚙️", an emoji
        # with a variation selector); the screen shows the same without them
        self.stream.feed(ZERO_WIDTH.sub("", chunk))
        return True

    def wait(self, found, what: str, timeout: float = HERMES_TIMEOUT):
        """Read the screen until ``found()`` gives something; ``what`` names it in the failure."""
        deadline = time.monotonic() + timeout
        while True:
            value = found()
            if value:
                return value
            left = deadline - time.monotonic()
            alive = left > 0 and self._read(min(left, 5.0))
            if not alive and not found():
                raise AssertionError(f"not on the screen after {timeout:.0f} s: {what}\n--- screen (end)\n"
                                     + "\n".join(self.lines()[-60:]))

    def wait_for(self, text: str, timeout: float = HERMES_TIMEOUT, after: str | None = None) -> str:
        """Wait until ``text`` is on the screen (after the last line holding ``after``, if given)."""
        def found() -> str:
            where = self.text if after is None else self.after(after)
            return where if folded(text) in folded(where) else ""
        return self.wait(found, repr(text) + (f" after {after!r}" if after else ""), timeout)

    def reply_to(self, message: str) -> str:
        """The words of Hermes's reply under the echo of ``message`` ('' while it is not whole)."""
        lines = self.after(f"● {message[:40]}").splitlines()
        start = next((i for i, line in enumerate(lines) if REPLY_LABEL in line), None)
        if start is None:
            return ""
        words = []
        for line in lines[start + 1:]:
            edge = line.strip()
            if STATUS_BAR.match(edge):  # the prompt's own lines: the reply is not all printed yet
                return ""
            if edge.startswith("╰") or (len(edge) >= 20 and set(edge) == {"─"}):
                return folded(" ".join(words))
            words.append(edge)
        return ""

    # -- typing --------------------------------------------------------------------

    def type(self, line: str) -> None:
        """Type a line and press Enter."""
        self.child.send(line + "\r")

    def ask(self, message: str, timeout: float = HERMES_TIMEOUT) -> str:
        """Type a message and wait for the whole reply; returns its words as the screen shows them."""
        self.type(message)
        return self.wait(lambda: self.reply_to(message), f"a reply to {message!r}", timeout)

    def command(self, line: str, answer: str, timeout: float = HERMES_TIMEOUT) -> str:
        """Type a slash command and wait for ``answer`` (a part of what it prints) under it."""
        self.type(line)
        return self.wait_for(answer, timeout, after=line)

    def interrupt(self) -> None:
        self.child.send("\x03")

    def exit(self, timeout: float = HERMES_TIMEOUT) -> str:
        """``/exit``; waits for Hermes to end and returns its session id (from its goodbye lines)."""
        self.type("/exit")
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            if time.monotonic() > deadline:
                raise AssertionError("hermes did not exit after /exit:\n" + "\n".join(self.lines()[-60:]))
        self.child.close()
        found = re.findall(r"hermes --resume (\S+)", self.after("Resume this session with"))
        assert found, "no session id in Hermes's goodbye:\n" + "\n".join(self.lines()[-60:])
        return found[-1]

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        self.log.close()
