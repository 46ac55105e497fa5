"""The code sandbox (see `helpers.sandbox.wire` for the framed-pipe reader the kit's workers share)."""
