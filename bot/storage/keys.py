"""Every Redis key queuepilot uses, named in one place.

State lives under `<prefix>:v2:` (this layout's version): a key of another layout is never read as
one of this layout (a plain string read as a hash would wedge its group). The notification stream
is not versioned, so entries accepted before an upgrade are applied after it. Below, names are
relative to `<prefix>:v2:`.

Per incident (TTL: retention after the last change): `incident:<id>` (hash: v, uid, channel,
state, thread, rendered), `timeline:<id>`, `outbox:<id>` and `outbox:<id>:items`,
`message:<channel>:<ts>`. Per alert group: `group:<hash>`. Per channel, for its sender:
`send:<channel>:*`. Indexes (`incidents`, `open`, `status-due`, `send-channels`) and counters are
refreshed by every write. The two streams (accepted notifications, Slack requests) and their dead
letters are the only keys without a TTL: a stream holds its entries until they are done, and is
empty otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA = "v2"


@dataclass(frozen=True)
class Keys:
    prefix: str

    def _(self, *parts: str) -> str:
        return ":".join((self.prefix, SCHEMA, *parts))

    # -- intake (unversioned: what was accepted outlives an upgrade) ------------------------
    @property
    def stream(self) -> str:
        return f"{self.prefix}:notifications"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}:notifications:dead"

    @property
    def requests(self) -> str:
        """Slack requests acknowledged by any replica, until one performs them."""
        return f"{self.prefix}:requests"

    @property
    def request_dead_letters(self) -> str:
        return f"{self.prefix}:requests:dead"

    # -- incidents -------------------------------------------------------------------------
    def incident(self, incident_id: str) -> str:
        return self._("incident", incident_id)

    def group(self, group_hash: str) -> str:
        return self._("group", group_hash)

    def timeline(self, incident_id: str) -> str:
        return self._("timeline", incident_id)

    def message(self, channel: str, ts: str) -> str:
        return self._("message", channel, ts)

    @property
    def incidents(self) -> str:
        return self._("incidents")

    @property
    def open(self) -> str:
        return self._("open")

    @property
    def status_due(self) -> str:
        return self._("status-due")

    @property
    def incident_seq(self) -> str:
        return self._("incident-seq")

    # -- what Slack must show --------------------------------------------------------------
    def outbox(self, incident_id: str) -> str:
        return self._("outbox", incident_id)

    def outbox_items(self, incident_id: str) -> str:
        return self._("outbox", incident_id, "items")

    def posts(self, channel: str) -> str:
        return self._("send", channel, "posts")

    def edits(self, channel: str) -> str:
        return self._("send", channel, "edits")

    def edit_after(self, channel: str) -> str:
        return self._("send", channel, "edit-after")

    def posts_bell(self, channel: str) -> str:
        return self._("send", channel, "bell", "posts")

    def edits_bell(self, channel: str) -> str:
        return self._("send", channel, "bell", "edits")

    def in_flight(self, channel: str) -> str:
        return self._("send", channel, "in-flight")

    def storm(self, channel: str) -> str:
        return self._("send", channel, "storm")

    def storm_members(self, channel: str) -> str:
        return self._("send", channel, "storm", "members")

    def storm_links(self, channel: str) -> str:
        return self._("send", channel, "storm", "links")

    def storm_placed(self, channel: str) -> str:
        """Which digest message (0 the first, then its continuations) lists each group."""
        return self._("send", channel, "storm", "placed")

    def storm_paused(self, channel: str) -> str:
        """Set for a while after a digest that can never be sent: no new storm opens meanwhile."""
        return self._("send", channel, "storm", "paused")

    def sender_lease(self, channel: str) -> str:
        return self._("lease", "sender", channel)

    @property
    def send_channels(self) -> str:
        return self._("send-channels")

    @property
    def send_seq(self) -> str:
        return self._("send-seq")

    @property
    def undeliverable(self) -> str:
        return self._("send", "undeliverable")

    # -- early warnings ----------------------------------------------------------------------
    @property
    def warnings(self) -> str:
        return self._("warnings")

    def warning(self, runner_type: str) -> str:
        return self._("warning", runner_type)

    def warning_edits(self, channel: str) -> str:
        return self._("send", channel, "warning-edits")

    def warning_bell(self, channel: str) -> str:
        return self._("send", channel, "warning-bell")

    def warning_reading(self, reading_at: str) -> str:
        return self._("warnings", "reading", reading_at)

    # -- notices (the weekly report) -----------------------------------------------------------
    def notice(self, uid: str) -> str:
        return self._("notice", uid)

    def notice_claim(self, what: str) -> str:
        return self._("notice-claim", what)

    @property
    def chart_blocks_refused(self) -> str:
        """Set while the workspace refuses Slack's chart block: charts are uploaded instead."""
        return self._("slack", "chart-blocks-refused")

    # -- Slack's names (`bot.storage.user_names`) -----------------------------------------
    def user(self, user_id: str) -> str:
        return self._("user", user_id)

    # -- responder actions -----------------------------------------------------------------
    def interaction(self, interaction_id: str) -> str:
        return self._("interaction", interaction_id)

    def action_lock(self, incident_id: str, what: str) -> str:
        return self._("action-lock", incident_id, what)

    @property
    def silence_watch(self) -> str:
        return self._("silence-watch")

    @property
    def scale_reverts(self) -> str:
        """Scale-ups made from Slack that will be put back: record id -> when to look again."""
        return self._("scale-reverts")

    def scale_revert(self, record_id: str) -> str:
        """What one scale-up changed (before, after, resource version), until it is put back."""
        return self._("scale-revert", record_id)

    # -- the alert's GitHub issue --------------------------------------------------------------
    @property
    def issue_due(self) -> str:
        """Incidents whose GitHub issue has something to hear (the commit script marks them)."""
        return self._("issue-due")

    def issue_pass(self, incident_id: str) -> str:
        """The lease of the one replica telling the incident's issue now."""
        return self._("lease", "issue", incident_id)

    def issue_link(self, incident_id: str) -> str:
        """The incident's issue as linked, and what it was told (`IssueLink`)."""
        return self._("issue", incident_id)

    # -- live queue metrics (one reading shared by every incident and replica) ------------
    @property
    def fleet_reading(self) -> str:
        return self._("fleet", "reading")

    @property
    def fleet_history(self) -> str:
        return self._("fleet", "history")

    def readings_day(self, day: str) -> str:
        """One UTC day (YYYYMMDD) of kept readings, a field per slot: the capacity report's
        history where the metrics backend keeps none (`bot.fleet.readings_history`)."""
        return self._("fleet", "kept", day)

    def jobs_seen(self, slot: int) -> str:
        """Queued jobs created in one five-minute slot (epoch seconds / 300) that were seen, so
        each counts once as an arrival."""
        return self._("jobs", "seen", str(slot))

    def job_arrivals(self, slot: int) -> str:
        """Arrivals in one five-minute slot, per runner type and workflow."""
        return self._("jobs", "arrivals", str(slot))

    def job_durations(self, slot: int) -> str:
        """Jobs that finished in one five-minute slot and their minutes, per type and workflow."""
        return self._("jobs", "durations", str(slot))

    # -- the App Home (`bot.storage.home`) --------------------------------------------------
    @property
    def home_viewers(self) -> str:
        """Who opened the Home tab: user -> when they last opened it."""
        return self._("home", "viewers")

    @property
    def home_shown(self) -> str:
        """What each viewer's Home shows: user -> its digests, when published, Slack's hash."""
        return self._("home", "shown")

    def home_claim(self, user: str, digest: str) -> str:
        """Claimed by the replica that publishes `digest` to `user`: once across replicas."""
        return self._("home", "claim", user, digest)

    def permalink(self, channel: str, ts: str) -> str:
        return self._("permalink", channel, ts)

    @property
    def leader(self) -> str:
        """The lease of the replica that does the work (`bot.storage.leader`)."""
        return self._("lease", "leader")

    @property
    def leader_tokens(self) -> str:
        """The fencing tokens' sequence: each new lead takes the next number."""
        return self._("leader-tokens")

    def slack_event(self, event_id: str) -> str:
        return self._("slack-event", event_id)
