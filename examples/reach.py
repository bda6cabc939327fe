"""Reach, Storm's DRPC example: how many distinct people were exposed to a URL?

Reach is everyone who follows anyone who tweeted the URL. Computing it for one URL
means fanning out to every tweeter's followers, removing duplicates and counting: a
lot of work for one request, done in parallel by a linear DRPC topology:

    bolt0  GetTweeters      [request, url]      -> [request, tweeter]     one per tweeter
    bolt1  GetFollowers     [request, tweeter]  -> [request, follower]    one per follower
    bolt2  PartialUniquer   fields (request, follower): each task keeps a set of the
                            followers it saw; when it has seen all of the request's
                            tuples (finished_id) it emits [request, its set's size]
    bolt3  CountAggregator  fields (request): sums the partial counts and, once finished,
                            emits [request, reach]

A follower goes to one PartialUniquer task (fields grouping on request and follower),
so the partial sets are disjoint and their sizes add up to the distinct count. The
"databases" are in-memory dicts shipped with the example (Storm's storm-starter data).

    python examples/reach.py
"""

from __future__ import annotations

import sys
from typing import Any

from tupletree import BasicBolt, Bolt, LocalCluster
from tupletree.drpc import FinishedCallback, LinearDRPCTopologyBuilder, LocalDRPC

TWEETERS_DB: dict[str, list[str]] = {
    "foo.com/blog/1": ["sally", "bob", "tim", "george", "nathan"],
    "engineering.twitter.com/blog/5": ["adam", "david", "sally", "nathan"],
    "tech.backtype.com/blog/123": ["tim", "mike", "john"],
}

FOLLOWERS_DB: dict[str, list[str]] = {
    "sally": ["bob", "tim", "alice", "adam", "jim", "chris", "jai"],
    "bob": ["sally", "nathan", "jim", "mary", "david", "vivian"],
    "tim": ["alex"],
    "nathan": ["sally", "bob", "adam", "harry", "chris", "vivian", "emily", "jordan"],
    "adam": ["david", "carissa"],
    "mike": ["john", "bob"],
    "john": ["alice", "nathan", "jim", "mike", "bob"],
}


class GetTweeters(BasicBolt):
    """[request, url] -> [request, tweeter] for each person who tweeted the URL."""

    outputs = ["request", "tweeter"]

    def execute(self, tup: Any, collector: Any) -> None:
        request, url = tup[0], tup[1]
        for tweeter in TWEETERS_DB.get(url, []):
            collector.emit([request, tweeter])


class GetFollowers(BasicBolt):
    """[request, tweeter] -> [request, follower] for each of the tweeter's followers."""

    outputs = ["request", "follower"]

    def execute(self, tup: Any, collector: Any) -> None:
        request, tweeter = tup[0], tup[1]
        for follower in FOLLOWERS_DB.get(tweeter, []):
            collector.emit([request, follower])


class PartialUniquer(Bolt, FinishedCallback):
    """Distinct followers per request, among the followers this task is sent."""

    outputs = ["request", "partial-count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sets: dict[Any, set[str]] = {}

    def execute(self, tup: Any) -> None:
        self.sets.setdefault(tup[0], set()).add(tup[1])
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        # Called once per request on every task, even one that got no followers (0).
        self.collector.emit([request_id, len(self.sets.pop(request_id, ()))])


class CountAggregator(Bolt, FinishedCallback):
    """Sums the partial counts of a request into its reach."""

    outputs = ["request", "reach"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + tup[1]
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


def build() -> LinearDRPCTopologyBuilder:
    """Storm's ReachTopology, parallelism included."""
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 4)
    builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 6).fields_grouping(["request", "follower"])
    builder.add_bolt(CountAggregator(), 3).fields_grouping(["request"])
    return builder


def expected_reach(url: str) -> int:
    """The answer computed directly, to check the topology against."""
    return len({f for t in TWEETERS_DB.get(url, []) for f in FOLLOWERS_DB.get(t, [])})


def main() -> int:
    urls = [*TWEETERS_DB, "nobody.example/never-tweeted"]
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        cluster.submit_topology("reach-drpc", {}, build().create_local_topology(drpc))
        ok = True
        for url in urls:
            reach = drpc.execute("reach", url)
            ok &= reach == str(expected_reach(url))
            print(f"Reach of {url}: {reach}")
        errors = cluster.errors("reach-drpc")
    if errors:
        print(f"{len(errors)} error(s); the first:\n{errors[0]}", file=sys.stderr)
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
