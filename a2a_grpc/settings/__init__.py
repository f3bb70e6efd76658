"""Every setting of `a2a-grpc serve`, declared once, by section: the flags and their groups in `serve --help`
(a2a_grpc.settings.flags), the environment variables, the config file's keys and `config show`
(a2a_grpc.config), and the settings table of docs/configuration.md (a2a_grpc.settings.docs) are all made
from it. Every default is named once, in a2a_grpc.settings.defaults, which ServerSettings' fields and the parts
that take the settings read too."""

from __future__ import annotations

from a2a_grpc.settings.running import RUNNING_SECTIONS
from a2a_grpc.settings.serving import SERVING_SECTIONS
from a2a_grpc.settings.setting import Kind, Setting

__all__ = ["FILE_SETTINGS", "SECTIONS", "SETTINGS", "Kind", "Setting"]

SECTIONS = {**SERVING_SECTIONS, **RUNNING_SECTIONS}  # in `serve --help`'s order
SETTINGS = tuple(setting for settings in SECTIONS.values() for setting in settings)
FILE_SETTINGS = {setting.key: setting for setting in SETTINGS if setting.in_file}  # by the config file's key
