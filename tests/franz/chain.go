package main

// The churn chain with franz-go's consumers: the same program as tests/java/ChurnChain.java
// (arguments, steps and output lines), so bench/churn-compare and the tests compare clients on
// equal terms.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type chainConfig struct {
	bootstrap, variant, prefix  string
	records, stages, partitions int
	maxMembers                  int
	pollPause                   time.Duration
	deadline                    time.Time
	txn                         bool
}

// member is one member of one stage's group, on a goroutine of its own.
type member struct {
	cfg          *chainConfig
	stage, index int
	instance     string
	owned        sync.Map // partition -> struct{}
	// synced: the whole assignment of the member's latest SyncGroup (classic protocol), which
	// its next OnPartitionsAssigned makes its owned set (see syncRecorder).
	synced atomic.Pointer[map[string][]int32]
	stop   atomic.Bool
	closed atomic.Bool
	done   chan struct{}
}

func (c *chainConfig) group(stage int) string { return fmt.Sprintf("%s-g%d", c.prefix, stage) }
func (c *chainConfig) topic(stage int) string { return fmt.Sprintf("%s-%d", c.prefix, stage) }

func (m *member) opts() []kgo.Opt {
	c := m.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.bootstrap, ",")...),
		kgo.ConsumerGroup(c.group(m.stage)),
		kgo.ConsumeTopics(c.topic(m.stage)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithLogger(sessionLogger{fmt.Sprintf("g%d/m%d", m.stage, m.index)}),
		kgo.WithHooks(traceHook{fmt.Sprintf("g%d/m%d", m.stage, m.index)}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "assigned %v", a)
			m.assigned(a)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "revoked %v", r)
			m.drop(r)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "lost %v", l)
			m.drop(l)
		}),
	}
	if !c.txn {
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	}
	switch c.variant {
	case "eager":
		opts = append(opts, kgo.Balancers(syncRecorder{kgo.RangeBalancer(), m}))
	case "cooperative":
		opts = append(opts, kgo.Balancers(syncRecorder{kgo.CooperativeStickyBalancer(), m}))
	case "static":
		opts = append(opts, kgo.Balancers(syncRecorder{kgo.RangeBalancer(), m}), kgo.InstanceID(m.instance))
	case "consumer-uniform":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	case "consumer-range":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	default:
		panic("unknown variant " + c.variant)
	}
	if !strings.HasPrefix(c.variant, "consumer-") {
		opts = append(opts, kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	}
	if c.txn {
		opts = append(opts,
			kgo.TransactionalID(fmt.Sprintf("%s-t%d-m%d", c.prefix, m.stage, m.index)),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
		)
	}
	return opts
}

// syncRecorder is a classic-protocol balancer that records each SyncGroup assignment of its
// member: the whole set of partitions the member holds in the group session that follows
// (franz-go stores exactly what ParseSyncAssignment returns as its assignment).
type syncRecorder struct {
	kgo.GroupBalancer
	m *member
}

func (r syncRecorder) ParseSyncAssignment(b []byte) (map[string][]int32, error) {
	a, err := r.GroupBalancer.ParseSyncAssignment(b)
	if err == nil {
		// A copy: the client sorts the partitions of what it is given in place.
		whole := make(map[string][]int32, len(a))
		for t, ps := range a {
			whole[t] = slices.Clone(ps)
		}
		r.m.synced.Store(&whole)
	}
	return a, err
}

// assigned records a group session's start (OnPartitionsAssigned, which franz-go calls at
// every session, with only the partitions added since the last one). With the classic
// protocol the owned set becomes the session's whole assignment: a revocation may not have
// been reported, since GroupTransactSession passes OnPartitionsRevoked and OnPartitionsLost
// on to the program only once between two End calls (txn.go: the wrappers return early
// while the session is already marked revoked or lost), and a member that stays revoked
// while an End is under way, or that has no records to end a transaction with, is revoked
// again unseen. With the consumer protocol (no SyncGroup) the added partitions are added.
func (m *member) assigned(added map[string][]int32) {
	if whole := m.synced.Load(); whole != nil {
		m.owned.Range(func(k, _ any) bool { m.owned.Delete(k); return true })
		added = *whole
	}
	topic := m.cfg.topic(m.stage)
	for t, ps := range added {
		if t != topic {
			continue
		}
		for _, p := range ps {
			m.owned.Store(p, struct{}{})
		}
	}
}

func (m *member) drop(parts map[string][]int32) {
	for _, ps := range parts {
		for _, p := range ps {
			m.owned.Delete(p)
		}
	}
}

func (m *member) fail(err error) {
	out("ERROR member %d/%d %v", m.stage, m.index, err)
	failed.Store(true)
}

// run consumes the stage's topic and produces every record on to the next one: at least once
// (produce, flush, commit, then let a rebalance happen) or, with txn, in a transaction per poll
// that carries the group's offsets.
func (m *member) run(producer *kgo.Client) {
	defer func() {
		m.owned.Range(func(k, _ any) bool { m.owned.Delete(k); return true })
		m.closed.Store(true)
		close(m.done)
	}()
	next := m.cfg.topic(m.stage + 1)
	ctx := context.Background()
	if m.cfg.txn {
		sess, err := kgo.NewGroupTransactSession(m.opts()...)
		if err != nil {
			m.fail(err)
			return
		}
		for !m.stop.Load() {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			fetches := sess.PollRecords(pctx, 500)
			cancel()
			recs := fetches.Records()
			if len(recs) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				m.fail(err)
				break
			}
			for _, r := range recs {
				sess.Produce(ctx, &kgo.Record{Topic: next, Key: r.Key, Value: r.Value}, nil)
			}
			if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
				// A rebalance or a fence aborted it: the records are read again.
				out("NOTE member %d/%d end: %v", m.stage, m.index, err)
			}
			if m.cfg.pollPause > 0 {
				time.Sleep(m.cfg.pollPause)
			}
		}
		sess.Close()
		m.leaveIfStatic(producer)
		return
	}
	cl, err := kgo.NewClient(m.opts()...)
	if err != nil {
		m.fail(err)
		return
	}
	for !m.stop.Load() {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pctx, 500)
		cancel()
		recs := fetches.Records()
		for _, r := range recs {
			producer.Produce(ctx, &kgo.Record{Topic: next, Key: r.Key, Value: r.Value}, nil)
		}
		if len(recs) > 0 {
			if err := producer.Flush(ctx); err == nil {
				// A rebalance that took the partitions fails the commit: their next owner
				// reads them again (at least once).
				_ = cl.CommitRecords(ctx, recs...)
			}
		}
		cl.AllowRebalance()
		if len(recs) > 0 && m.cfg.pollPause > 0 {
			time.Sleep(m.cfg.pollPause)
		}
	}
	trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "closing")
	cl.Close()
	trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "closed")
	m.leaveIfStatic(producer)
}

// leaveIfStatic: a static member's Close keeps its place in the group; it leaves as Java's
// CloseOptions LEAVE_GROUP does, by instance id (through the admin API on admin's client).
func (m *member) leaveIfStatic(admin *kgo.Client) {
	if m.cfg.variant != "static" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer trace(fmt.Sprintf("g%d/m%d", m.stage, m.index), "left by instance id")
	_, err := kadm.NewClient(admin).LeaveGroup(ctx, kadm.LeaveGroup(m.cfg.group(m.stage)).InstanceIDs(m.instance))
	if err != nil {
		out("NOTE member %d/%d leave: %v", m.stage, m.index, err)
	}
}

func (m *member) ownedSet() map[int32]bool {
	s := map[int32]bool{}
	m.owned.Range(func(k, _ any) bool { s[k.(int32)] = true; return true })
	return s
}

// stable: the group's live members own every partition once, each at least one, shares
// within one of each other; and every member of leaving has closed.
func stable(partitions int, members, leaving []*member) bool {
	for _, m := range leaving {
		if !m.closed.Load() {
			return false
		}
	}
	counts := make([]int, partitions)
	lo, hi := 1<<30, 0
	for _, m := range members {
		own := m.ownedSet()
		for p := range own {
			if int(p) < partitions {
				counts[p]++
			}
		}
		lo = min(lo, len(own))
		hi = max(hi, len(own))
	}
	for _, n := range counts {
		if n != 1 {
			return false
		}
	}
	return lo >= 1 && hi-lo <= 1
}

func runChain(args []string) int {
	if len(args) < 9 {
		out("ERROR usage: chain BOOTSTRAP VARIANT PREFIX RECORDS STAGES PARTITIONS MAX_MEMBERS POLL_PAUSE_MS TIMEOUT_S [txn]")
		return 2
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	c := &chainConfig{
		bootstrap: args[0], variant: args[1], prefix: args[2],
		records: num(args[3]), stages: num(args[4]), partitions: num(args[5]),
		maxMembers: num(args[6]), pollPause: time.Duration(num(args[7])) * time.Millisecond,
		deadline: time.Now().Add(time.Duration(num(args[8])) * time.Second),
		txn:      len(args) > 9 && args[9] == "txn",
	}
	out("START")
	ctx := context.Background()
	seeds := kgo.SeedBrokers(strings.Split(c.bootstrap, ",")...)
	admin, err := kgo.NewClient(seeds)
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	defer admin.Close()
	var topics []string
	for s := 0; s <= c.stages; s++ {
		topics = append(topics, c.topic(s))
	}
	if _, err := kadm.NewClient(admin).CreateTopics(ctx, int32(c.partitions), 1, nil, topics...); err != nil {
		out("ERROR create topics: %v", err)
		return 1
	}

	// The reader of the chain's end.
	var seen sync.Map
	var distinct, read atomic.Int64
	readerCtx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	readerDone := make(chan struct{})
	readOpts := []kgo.Opt{seeds, kgo.ConsumeTopics(c.topic(c.stages)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithLogger(sessionLogger{"other"})}
	if c.txn {
		readOpts = append(readOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	reader, err := kgo.NewClient(readOpts...)
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	go func() {
		defer close(readerDone)
		for readerCtx.Err() == nil {
			pctx, cancel := context.WithTimeout(readerCtx, 100*time.Millisecond)
			fetches := reader.PollFetches(pctx)
			cancel()
			fetches.EachRecord(func(r *kgo.Record) {
				read.Add(1)
				if _, had := seen.LoadOrStore(string(r.Value), struct{}{}); !had {
					distinct.Add(1)
				}
			})
		}
	}()

	producers := make([]*kgo.Client, c.stages)
	for s := range producers {
		producers[s], err = kgo.NewClient(seeds, kgo.ProducerLinger(5*time.Millisecond), kgo.WithLogger(sessionLogger{"other"}))
		if err != nil {
			out("ERROR %v", err)
			return 1
		}
	}
	groups := make([][]*member, c.stages)
	nextIndex := make([]int, c.stages)
	code := 0
	func() {
		var stableTotal, stableMax int64
		// The records are produced before the first member of each group joins, so that every
		// counted step begins right after the previous one became stable, whatever the
		// broker's produce time (a step's length depends on when it begins in the members'
		// heartbeat intervals).
		p, err := kgo.NewClient(seeds, kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			out("ERROR %v", err)
			code = 1
			return
		}
		t0 := time.Now()
		for i := 0; i < c.records; i++ {
			k := []byte(strconv.Itoa(i))
			p.Produce(ctx, &kgo.Record{Topic: c.topic(0), Key: k, Value: k}, nil)
		}
		if err := p.Flush(ctx); err != nil {
			out("ERROR produce: %v", err)
			code = 1
			return
		}
		p.Close()
		out("PRODUCED %d %d", c.records, time.Since(t0).Milliseconds())
		plan := []string{"join"}
		for i := 1; i < c.maxMembers; i++ {
			plan = append(plan, "join")
		}
		for i := 1; i < c.maxMembers; i++ {
			plan = append(plan, "leave")
		}
		for step, change := range plan {
			began := time.Now()
			trace("chain", "step %d %s begins", step, change)
			leaving := make([][]*member, c.stages)
			for s := 0; s < c.stages; s++ {
				if change == "join" {
					m := &member{cfg: c, stage: s, index: nextIndex[s], done: make(chan struct{})}
					m.instance = fmt.Sprintf("%s-m%d", c.group(s), m.index)
					nextIndex[s]++
					groups[s] = append(groups[s], m)
					go m.run(producers[s])
				} else {
					m := groups[s][0] // the oldest member leaves
					groups[s] = groups[s][1:]
					m.stop.Store(true)
					leaving[s] = append(leaving[s], m)
				}
			}
			for {
				all := true
				for s := 0; s < c.stages && all; s++ {
					all = stable(c.partitions, groups[s], leaving[s])
				}
				if all {
					break
				}
				if failed.Load() || time.Now().After(c.deadline) {
					var state []string
					for s := 0; s < c.stages; s++ {
						for _, m := range groups[s] {
							state = append(state, fmt.Sprintf("g%d/m%d:%v", s, m.index, m.ownedSet()))
						}
						for _, m := range leaving[s] {
							state = append(state, fmt.Sprintf("g%d/m%d:leaving,closed=%v", s, m.index, m.closed.Load()))
						}
					}
					out("ERROR not stable after step %d (%s) seen=%d: %s", step, change, distinct.Load(),
						strings.Join(state, " "))
					code = 1
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			ms := time.Since(began).Milliseconds()
			trace("chain", "step %d %s stable after %d ms", step, change, ms)
			if step > 0 {
				stableTotal += ms
				stableMax = max(stableMax, ms)
			}
			out("STABLE %d %s %d %d", step, change, len(groups[0]), ms)
		}
		for distinct.Load() < int64(c.records) {
			if failed.Load() || time.Now().After(c.deadline) {
				out("ERROR drained %d of %d", distinct.Load(), c.records)
				code = 1
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		drain := time.Since(t0).Milliseconds()
		out("DRAINED %d", drain)
		time.Sleep(500 * time.Millisecond) // duplicates still on the way show in read=
		out("RESULT variant=%s records=%d distinct=%d read=%d stable_ms=%d stable_max_ms=%d drain_ms=%d session_resets=%d",
			c.variant, c.records, distinct.Load(), read.Load(), stableTotal, stableMax, drain, sessionResets.Load())
	}()
	for _, g := range groups {
		for _, m := range g {
			m.stop.Store(true)
		}
	}
	for _, g := range groups {
		for _, m := range g {
			select {
			case <-m.done:
			case <-time.After(30 * time.Second):
				out("ERROR member %d/%d did not close", m.stage, m.index)
				code = 1
			}
		}
	}
	stopReader()
	<-readerDone
	reader.Close()
	for _, p := range producers {
		p.Close()
	}
	if code == 0 {
		out("DONE")
	}
	return code
}
