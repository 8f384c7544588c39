"""The console's pages: each module has ``NAV`` (menu entries) and ``routes(console)``
(kwire.console.app lists them in ``PAGES``)."""
