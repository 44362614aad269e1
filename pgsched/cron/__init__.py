"""Cron expressions: the one package that knows cron. Pure (no database).

It checks an expression the way cronie's entry.c does (crontab(5): 5 fields, or 6 with a
leading second as in Quartz and Spring; numbers or names, ranges, steps on ``*`` or a
range, lists, the ``@`` nicknames; Quartz's ``L``, ``W`` and ``#`` day items) and
computes fire times with croniter in an IANA time zone, correcting croniter where it
differs from cron(8): the day-field rule, fixed-time jobs when clocks fall back, ranges
it mis-expands, and the day items it lacks. Everything else that reads cron (schedules,
crontab import) goes through here, so a correction lands in one place.

The parts: :mod:`.fields` (each field, its values and day items), :mod:`.days` (which
days fire), :mod:`.dst` (clock changes), :mod:`.fires` (the next fire, via croniter),
:mod:`.walk` (counting the fires of a span) and :mod:`.expression` (checking a whole
expression). This module is their public face.
"""

from __future__ import annotations

from .expression import check
from .fields import NICKNAMES, CronError
from .fires import next_after
from .walk import walk

__all__ = ["NICKNAMES", "CronError", "check", "next_after", "walk"]
