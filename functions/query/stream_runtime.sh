#!/bin/sh
# The query function's AWS_LAMBDA_EXEC_WRAPPER: the managed Python runtime's interpreter runs citewise's
# runtime loop, which can stream a response (citewise.api.streaming_runtime; docs/aws.md), instead of
# AWS's own loop (the command this script is given and does not run).
exec python3 -m citewise.api.streaming_runtime
