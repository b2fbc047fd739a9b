"""What the aiohttp app holds: the model manager, shared by every API face."""

from aiohttp import web

from localserve.engine.manager import ModelManager

MANAGER = web.AppKey("manager", ModelManager)
