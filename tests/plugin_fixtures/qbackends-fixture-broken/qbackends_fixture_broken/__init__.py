"""A plugin whose import fails, as one with a missing dependency does."""

raise ImportError("qbackends_fixture_broken needs the package 'not-installed-sdk'")
