"""Stack files whose YAML Pulumi reads unlike PyYAML (YAML 1.1) or a YAML 1.2 core reader.

`tests/pulumi_config/expected.json` holds, for each, what Pulumi's engine passes the program
(PULUMI_CONFIG), computed by `tests/pulumi_config/main.go` with gopkg.in/yaml.v3 v3.0.1 and Go's
own JSON, number and time code. Regenerate it after changing a case (Debian's golang-go and
golang-gopkg-yaml.v3-dev; the program's header says how):

    .venv/bin/python -m tests.pulumi_config_cases > /tmp/cases.json
    cd tests/pulumi_config && TZ=UTC GO111MODULE=off GOPATH=/usr/share/gocode \\
        go run main.go < /tmp/cases.json > expected.json
"""

import json

SCALARS = {
    # YAML 1.1 booleans are strings to yaml.v3; only true/false (any case style) are booleans.
    "yes": "yes", "no": "no", "on": "on", "off": "off", "y": "y", "Yes": "Yes", "TRUE": "TRUE",
    "True": "True", "false": "false",
    # Numbers as Go's strconv reads them once `_` is dropped.
    "exp": "1e3", "exp_upper": "1E3", "one_point_zero": "1.0", "two_point_five": "2.5",
    "octal_12": "0o17", "octal_upper": "0O17", "octal_11": "017", "not_octal": "08",
    "not_octal_9": "09", "hex": "0x1F", "hex_upper": "0X1f", "minus_hex": "-0x1F",
    "binary": "0b101", "underscores": "1_000", "underscore_float": "1_0.5", "plus": "+12",
    "minus_zero": "-0", "zero_zero": "00", "point_five": ".5", "plus_point_five": "+.5",
    "one_point": "1.", "bare_0x": "0x",
    "huge": "100000000000000000000", "uint64_max": "18446744073709551615",
    "beyond_uint64": "18446744073709551616", "int64_max_plus_one": "9223372036854775808",
    "below_int64": "-9223372036854775809", "plus_uint64_max": "+18446744073709551615",
    "overflow": "1e400", "underflow": "1e-400", "subnormal": "1.0e-309",
    "float_24_digits": "123456789012345678901234", "e21": "1e21", "e20": "1e20",
    "tiny": "0.0000001", "tenth": "0.1", "million": "1e6",
    # Nulls.
    "tilde": "~", "null": "null", "Null": "Null", "NULL": "NULL",
    # Timestamps (unquoted): Go times, printed by Go.
    "date": "2024-01-02", "short_date": "2024-1-2", "utc": "2024-01-02T10:11:12Z",
    "spaced": "2024-01-02 10:11:12", "fraction": "2024-01-02T10:11:12.500Z",
    "offset": "2024-01-02T10:11:12+02:00", "lower_t": "2001-12-14t21:59:43.10-05:00",
    "zero_offset": "2024-01-02T10:11:12+00:00", "not_a_date": "2024-02-30",
    "date_like_id": "2024-01-02-a",
    # Quoted text stays text; explicit tags.
    "quoted_exp": '"1e3"', "quoted_octal": "'017'", "quoted_yes": '"yes"', "quoted_date": '"2024-01-02"',
    "str_tag": "!!str 1e3", "int_tag": "!!int '12'", "float_tag": "!!float 3",
    "binary_tag": "!!binary aGVsbG8=", "local_tag": "!foo bar",
    # Strings JSON escapes.
    "html": '"a<b>&c"', "unicode": '"gr\\u00fcn \\u2028"',
}  # fmt: skip

CASES = {
    # Every scalar at the top of a key (config.get) and inside an object (get_object).
    **{
        f"top_{name}": f"config:\n  mig-inference:cloud: {text}\n" for name, text in SCALARS.items()
    },
    **{
        f"nested_{name}": f"config:\n  mig-inference:pools:\n    - value: {text}\n"
        for name, text in SCALARS.items()
    },
    "top_inf": "config:\n  mig-inference:cloud: .inf\n",
    "nested_nan": "config:\n  mig-inference:services: [{memoryGiB: .nan}]\n",
    "nested_minus_inf": "config:\n  mig-inference:services: [{memoryGiB: -.inf}]\n",
    "empty_value": "config:\n  mig-inference:cloud: gke\n  mig-inference:monitoring:\n",
    "empty_string": 'config:\n  mig-inference:monitoring: ""\n',
    "null_top": "config:\n  mig-inference:monitoring: ~\n",
    "bare_keys": "config:\n  cloud: gke\n  pools: [{name: a}]\n",
    "config_module_key": "config:\n  mig-inference:config:cloud: gke\n",
    "bad_key": "config:\n  a:b:c: gke\n",
    "same_key_bare_and_namespaced": "config:\n  cloud: gke\n  mig-inference:cloud: eks\n",
    "other_namespace": "config:\n  gcp:project: p\n  mig-inference:cloud: gke\n",
    "secret": "config:\n  mig-inference:hf:\n    secure: v1:abc\n",
    "nested_secret": "config:\n  mig-inference:cluster:\n    name: {secure: v1:abc}\n",
    "secure_not_string": "config:\n  mig-inference:cluster: {secure: 5}\n",
    "secure_with_more": "config:\n  mig-inference:cluster: {secure: a, b: c}\n",
    "non_string_keys": (
        "config:\n  mig-inference:pools:\n    - {1: a, 1.5: b, true: c, ~: d, 2024-01-02: e, 1e6: f}\n"
    ),
    "number_keys_like_strings": "config:\n  mig-inference:pools: [{1: a, '1': b}]\n",
    "duplicate_key": "config:\n  mig-inference:cloud: gke\n  mig-inference:cloud: eks\n",
    "duplicate_quoted_key": "config:\n  mig-inference:pools: [{a: 1, 'a': 2}]\n",
    "merge": (
        "config:\n  mig-inference:pools:\n    - &base {name: a, nodes: 1}\n"
        "    - {<<: *base, name: b}\n    - {<<: [*base, {spot: true, nodes: 3}], zones: []}\n"
    ),
    "anchors": "config:\n  mig-inference:pools: [&p {name: a}, *p]\n",
    "multi_document": "config:\n  mig-inference:cloud: gke\n---\nconfig:\n  mig-inference:cloud: eks\n",
    "bom": "\ufeffconfig:\n  mig-inference:cloud: gke\n",
    "empty_file": "",
    "no_config": "secretsprovider: passphrase\n",
    "config_list": "config: [a, b]\n",
    "top_list": "- a\n- b\n",
    "block_scalars": (
        "config:\n  mig-inference:services:\n    - args:\n        - |\n          017\n"
        "        - >\n          yes\n"
    ),
    "unicode_key": "config:\n  mig-inference:pools: [{naïve: 1}]\n",
    "deep_object": "config:\n  mig-inference:services: [{clients: [{podLabels: {a: 017, b: yes}}]}]\n",
}


if __name__ == "__main__":
    print(json.dumps(CASES, indent=1, sort_keys=True))
