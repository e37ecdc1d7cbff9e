"""Which configuration values are secrets, and how they are hidden (Flink's isSensitive rule)."""

from __future__ import annotations

import pytest

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.config.sensitive import (
    HIDDEN_CONTENT,
    hidden_items,
    hide_credentials,
    is_sensitive,
    job_configuration,
)


@pytest.mark.parametrize("key", [
    "security.cluster.secret", "spark.hadoop.fs.s3a.secret.key", "fs.s3a.access.key",
    "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", "metrics.reporter.x.password",
    "spark.ssl.keyPassword", "s3.session-token", "gcs.credentials-file", "security.ssl.private-key",
    "SPARK.AUTHENTICATE.SECRET", "my.apikey", "http-headers",
])
def test_sensitive_keys(key):
    assert is_sensitive(key)


@pytest.mark.parametrize("key", [
    "parallelism.default", "spark.remote", "state.backend.type", "security.ssl.rest.keystore",
    "pipeline.name", "rest.address", "spark.sql.shuffle.partitions", "keyed.state.ttl",
])
def test_ordinary_keys(key):
    assert not is_sensitive(key)


@pytest.mark.parametrize(("text", "shown"), [
    ("sc://spark.example.com:15002/;token=abc123;user_id=me",
     "sc://spark.example.com:15002/;token=******;user_id=me"),
    ("https://user:pa55w0rd@host:443/path", "https://user:******@host:443/path"),
    ("http://host/api?access_token=xyz&x=1", "http://host/api?access_token=******&x=1"),
    ("Authorization: Bearer s3cr3t, more", "Authorization: Bearer ******, more"),
    ("sc://127.0.0.1:15002", "sc://127.0.0.1:15002"),
    ("local[2]", "local[2]"),
])
def test_credentials_inside_values_are_hidden(text, shown):
    assert hide_credentials(text) == shown


def test_hidden_items_masks_keys_and_values_and_drops_none():
    items = hidden_items({"security.cluster.secret": "abc", "spark.remote": "sc://h:1/;token=t",
                          "parallelism.default": 4, "unset": None})
    assert items == {"security.cluster.secret": HIDDEN_CONTENT,
                     "spark.remote": "sc://h:1/;token=******", "parallelism.default": "4"}


def test_the_cluster_secret_never_enters_a_job_configuration():
    assert job_configuration({"security.cluster.secret": "abc", "pipeline.name": "x",
                              "spark.hadoop.fs.s3a.secret.key": "k"}) == {
        "pipeline.name": "x", "spark.hadoop.fs.s3a.secret.key": "k"}


def test_configuration_repr_and_errors_do_not_show_secrets():
    conf = Configuration({"security.cluster.secret": "abc-123",
                          "spark.remote": "sc://h:1/;token=tok-456"})
    assert "abc-123" not in repr(conf) and "tok-456" not in repr(conf)
    assert ";token=******" in repr(conf)
    with pytest.raises(IllegalConfigurationException) as err:
        Configuration({"rest.port": "sc://h:1/;token=tok-456"})
    assert "tok-456" not in str(err.value) and "rest.port" in str(err.value)
    with pytest.raises(IllegalConfigurationException) as err:
        Configuration({"rest.port": "not-a-port"})
    assert "not-a-port" in str(err.value)  # ordinary values are still shown
