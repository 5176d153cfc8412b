# Fill the model cache with one model revision, once, with the engine image's own downloader.
#
# MODEL     Hugging Face model id
# REVISION  its revision (a commit hash pins it)
# TARGET    the revision's directory on the cache volume
# STAGING   where the download lands first: TARGET.partial on a file system (renamed into
#           place), or a local directory for a bucket (copied in: object storage takes new files
#           written sequentially, not renames)
# ENGINE_FILES  the Python program that lists the files the engines load (one weight set, its
#           config and tokenizer: mig_inference/kube/scripts/engine_files.py), run with the
#           image's python3 and huggingface_hub
#
# The token, when the model needs one, is in HF_TOKEN (from the service's Kubernetes Secret).
# The revision counts as cached only once every file is in place: a marker written last.
set -eu
: "${MODEL:?}" "${REVISION:?}" "${TARGET:?}" "${STAGING:?}" "${ENGINE_FILES:?}"
marker="$TARGET/.mig-inference-complete"

if [ -f "$marker" ]; then
  echo "model-fill: $MODEL@$REVISION is already in the cache"
  exit 0
fi

# huggingface_hub's CLI: `hf` since 0.34, `huggingface-cli` before (both take these options,
# the file names right after the repository).
fetch() {
  if command -v hf >/dev/null 2>&1; then
    hf download "$@"
  elif command -v huggingface-cli >/dev/null 2>&1; then
    huggingface-cli download "$@"
  else
    echo "model-fill: the image has neither hf nor huggingface-cli" >&2
    return 1
  fi
}

rm -rf "$STAGING"
mkdir -p "$STAGING"
if ! files=$(python3 -c "$ENGINE_FILES"); then
  echo "model-fill: could not tell which files of $MODEL@$REVISION the engines load" >&2
  exit 1
fi
printf 'model-fill: downloading %s@%s:\n%s\n' "$MODEL" "$REVISION" "$files"
# One name per line; none holds a space or a glob in a model repository worth serving.
set -f
IFS='
'
# shellcheck disable=SC2086 # the names are split on new lines only
fetch "$MODEL" $files --revision "$REVISION" --local-dir "$STAGING"
unset IFS
set +f
# The downloader's own bookkeeping next to the files: not part of the model.
rm -rf "$STAGING/.cache"
if [ -z "$(ls -A "$STAGING")" ]; then
  echo "model-fill: $MODEL@$REVISION downloaded no files" >&2
  exit 1
fi

# A directory left by an earlier run that did not finish is not the model.
rm -rf "$TARGET"
mkdir -p "$(dirname "$TARGET")"
if [ "$STAGING" = "$TARGET.partial" ]; then
  mv "$STAGING" "$TARGET"
else
  mkdir -p "$TARGET"
  cp -R "$STAGING/." "$TARGET/"
  rm -rf "$STAGING"
fi
: > "$marker"
echo "model-fill: $MODEL@$REVISION is in the cache at $TARGET"
