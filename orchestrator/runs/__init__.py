"""A cell's run folder, owned in one place: its files (:mod:`.folder` names them), the one
atomic write (:mod:`.atomic`) and process liveness (:mod:`.liveness`)."""
