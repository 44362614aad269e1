"""The web admin and the REST API (starlette, Jinja2 templates in ``templates/web/``).

:func:`pgsched.web.app.create_app` builds the app; :mod:`pgsched.web.access` is what views
use (``require(request, role)``, ``database(request)``, ``form(request)``);
:mod:`pgsched.web.credentials` holds tokens, users and roles.
"""
