"""Minimal Django settings for the compatibility suite: no web, one database (the proxy's sharded logical
database, given by the environment), one app with a model on the sharded table ``t_order``."""

from __future__ import annotations

import os

SECRET_KEY = "shardproxy-compat-suite"  # test settings, never served
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "tests.compat.django_app.shop"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "HOST": os.environ.get("SHARDPROXY_COMPAT_HOST", "127.0.0.1"),
        "PORT": os.environ.get("SHARDPROXY_COMPAT_PORT", "3307"),
        "NAME": os.environ.get("SHARDPROXY_COMPAT_DB", "sharding_db"),
        "USER": "root",
        "PASSWORD": "root",
        "OPTIONS": {"charset": "utf8mb4"},
        "TEST": {"MIGRATE": True},
    }
}
