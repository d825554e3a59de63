"""The consent page and the error page of the proxy's authorization endpoint (standalone HTML: the
web UI may be off). Jinja2 with autoescape: every value shown comes from a client's registration."""

from __future__ import annotations

from jinja2 import Environment

_ENV = Environment(autoescape=True)

CONSENT = _ENV.from_string(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Allow {{ client_name }}? · toolweave</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}
code{background:#f3f3f3;padding:0 .2rem;word-break:break-all}button{font-size:1rem;padding:.4rem 1rem}</style>
</head><body>
<h1>Allow <q>{{ client_name }}</q> to use toolweave as you?</h1>
<p>The application <strong>{{ client_name }}</strong>{% if document %} (described at <code>{{ client_id }}</code>){% endif %}
asks for access to <code>{{ resource }}</code> with the scopes:</p>
<ul>{% for scope in scopes %}<li><code>{{ scope }}</code></li>{% endfor %}</ul>
<p>After you log in at <strong>{{ idp }}</strong>, your browser goes back to:</p>
<p><code>{{ redirect_uri }}</code></p>
<p>Only allow it if you started this from that application.</p>
<form method="post" action="{{ action }}">
<input type="hidden" name="login" value="{{ login }}">
<button type="submit" name="decision" value="allow">Allow and log in</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>
"""
)

PROBLEM = _ENV.from_string(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cannot log in · toolweave</title></head>
<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem">
<h1>Cannot log in</h1><p><code>{{ error }}</code>: {{ description }}</p></body></html>
"""
)
