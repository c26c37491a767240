"""What a run tells about itself: per-process statistics and their totals, the
timeline recorder, the message trace (``DAC_TRACE_DIR``) and what tasks print, carried
to the root as whole lines."""
