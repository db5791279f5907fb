# Sourced by every script: where stampo keeps what lives outside the clone.
# STAMPO_CACHE   tools, the shared cargo target directory, the Python reference venv
# STAMPO_MODELS  the default models (the one documented variable tests read)
export STAMPO_CACHE=${STAMPO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stampo}
export STAMPO_MODELS=${STAMPO_MODELS:-$STAMPO_CACHE/models}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$STAMPO_CACHE/target}
export PATH="$STAMPO_CACHE/tools/bin:$PATH"
