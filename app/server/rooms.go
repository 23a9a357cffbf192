package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-lab/seckill/adapters/drandbeacon"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/adapters/redisroom"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// admissionHeader carries a room voucher's admission on a seckill.
const admissionHeader = "X-Seckill-Admission"

// newRooms builds the waiting rooms over the sale's Redis: every backend
// has one (under sync, for the codes and limits), so every backend sells
// through rooms; their keys go under the shards' tags (one shard under
// sync).
func (s *Server) newRooms() *room.Rooms {
	shards := s.shards
	if shards.Count() == 0 {
		shards = redisreserve.SpreadShards(1)
	}
	return room.New(room.Config{Board: redisroom.New(s.rdb, s.cfg.KeyPrefix, shards), Catalog: s.catalog,
		Passes: room.NewPassSigner(s.cfg.JWTSecret, s.cfg.JWTSecretPrevious), Puzzle: room.NewPuzzle(s.cfg.JWTSecret, s.cfg.RoomPowBits, s.cfg.JWTSecretPrevious), Draws: s.store.RoomDraws(),
		Beacons: drandbeacon.New(5 * time.Second), Now: s.clock.Now, Observer: newRoomMetrics(s.metrics.registry, s.cfg.Queue), Log: s.log})
}

// roomJSON is a voucher's room as created and shown.
type roomJSON struct {
	OpensAt        time.Time `json:"opensAt"`
	AdmitPerSecond int       `json:"admitPerSecond"`
	// AdmissionTTL is a Go duration ("60s", "2m").
	AdmissionTTL string `json:"admissionTTL,omitempty"`
	// Beacon names a public beacon's round mixed into the draw's seed
	// at the begin (drand's HTTP API).
	Beacon *beaconJSON `json:"beacon,omitempty"`
}

// beaconJSON is a room's beacon as named at creation and shown; in the
// published draw, with what was read.
type beaconJSON struct {
	URL   string `json:"url"`
	Round uint64 `json:"round"`
	// Randomness is the round's, as read at the begin; MixedSeed
	// SHA-256(seed + randomness), what the keys are keyed with (the
	// draw's answer only).
	Randomness string `json:"randomness,omitempty"`
	MixedSeed  string `json:"mixedSeed,omitempty"`
	// Missed: the round could not be read within 30 s of the begin; the
	// keys are the seed's alone (the draw's answer only).
	Missed bool `json:"missed,omitempty"`
}

// room reads a voucher creation's room (nil: none).
func (r *roomJSON) room() (*core.Room, error) {
	if r == nil {
		return nil, nil
	}
	out := &core.Room{OpensAt: r.OpensAt, AdmitPerSecond: r.AdmitPerSecond}
	if r.AdmissionTTL != "" {
		ttl, err := time.ParseDuration(r.AdmissionTTL)
		if err != nil {
			return nil, badRequest("room.admissionTTL must be a duration such as \"60s\"")
		}
		out.AdmissionTTL = ttl
	}
	if r.Beacon != nil {
		if r.Beacon.URL == "" {
			return nil, badRequest("room.beacon.url is required (a drand chain's base URL)")
		}
		out.Beacon = core.RoomBeacon{URL: r.Beacon.URL, Round: r.Beacon.Round}
	}
	return out, nil
}

// showRoom puts v's room into its answer: the settings, and the draw's
// commitment from the voucher's creation on (the create answer included).
// Shown only from the room's opening, a seed swapped before it could not
// be caught (the security review): whoever keeps the creation's answer,
// or any answer before the opening, can now check the published seed.
func showRoom(out *voucherJSON, v core.Voucher) {
	if v.Room == nil {
		return
	}
	out.Room = &roomJSON{OpensAt: v.Room.OpensAt.UTC(), AdmitPerSecond: v.Room.AdmitPerSecond,
		AdmissionTTL: v.Room.AdmissionTTL.String()}
	if b := v.Room.Beacon; b.On() {
		out.Room.Beacon = &beaconJSON{URL: b.URL, Round: b.Round}
	}
	out.RoomCommitment = v.Room.Commitment()
}

// roomStatusJSON is a shopper's place as the contract shows it: null
// where a field means nothing yet.
type roomStatusJSON struct {
	State      room.State `json:"state"`
	Position   *int64     `json:"position"`
	Ahead      *int64     `json:"ahead"`
	EtaSeconds *int64     `json:"etaSeconds"`
	Admission  *string    `json:"admission"`
	// AdmissionExpiresAt is when the admission lapses (only with one).
	AdmissionExpiresAt *time.Time `json:"admissionExpiresAt,omitempty"`
	// Pow is the proof of work a join must carry (SECKILL_ROOM_POW_BITS;
	// only to a shopper not in the room).
	Pow *powJSON `json:"pow,omitempty"`
	// Salt is the shopper's own salt in the draw (shown to them alone):
	// with the published seed, their key is HMAC-SHA256(seed,
	// "<userId>:<salt>"). Absent in a room made before salts.
	Salt string `json:"salt,omitempty"`
}

// powJSON is the room's puzzle: find a nonce such that SHA-256 of
// "challenge:nonce" starts with bits zero bits.
type powJSON struct {
	Challenge string `json:"challenge"`
	Bits      int    `json:"bits"`
	Nonce     string `json:"nonce,omitempty"`
}

func toRoomStatusJSON(s room.Status) roomStatusJSON {
	out := roomStatusJSON{State: s.State}
	if s.Position > 0 {
		out.Position = &s.Position
	}
	if s.Ahead >= 0 {
		out.Ahead = &s.Ahead
	}
	if s.Wait >= 0 {
		eta := int64(math.Ceil(s.Wait.Seconds()))
		out.EtaSeconds = &eta
	}
	if s.Pass != "" {
		out.Admission, out.AdmissionExpiresAt = &s.Pass, &s.PassExpires
	}
	if s.Puzzle != "" {
		out.Pow = &powJSON{Challenge: s.Puzzle, Bits: s.PuzzleBits}
	}
	out.Salt = s.Salt
	return out
}

func (a *shopperRoutes) joinRoom(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	// The body is optional: {"pow": {"challenge", "nonce"}} where the
	// room asks a proof of work.
	var req struct {
		Pow *powJSON `json:"pow"`
	}
	if len(c.Body()) > 0 {
		if err := decodeStrict(c, &req); err != nil {
			return err
		}
	}
	var proof room.Proof
	if req.Pow != nil {
		proof = room.Proof{Challenge: req.Pow.Challenge, Nonce: req.Pow.Nonce}
	}
	s, err := a.rooms.Join(c.UserContext(), shopperID(c), id, proof)
	if err != nil {
		return err
	}
	return c.JSON(toRoomStatusJSON(s))
}

func (a *shopperRoutes) roomStatus(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	s, err := a.rooms.Status(c.UserContext(), shopperID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(toRoomStatusJSON(s))
}

func (a *shopperRoutes) roomDraw(c *fiber.Ctx) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	// Final once made, and up to 6.5 MB for 100,000 early joiners: it
	// is encoded once per instance, and a crowd checking it is also
	// served by caches.
	body, ok := a.draws.Load(id)
	if !ok {
		d, err := a.rooms.Draw(c.UserContext(), id)
		if err != nil {
			return err
		}
		answer := fiber.Map{"seed": d.Seed, "commitment": d.Commitment, "keyedWith": d.KeyedWith, "keys": d.Keys}
		if b := d.Beacon; b.URL != "" {
			answer["beacon"] = beaconJSON{URL: b.URL, Round: b.Round, Randomness: b.Randomness, MixedSeed: b.MixedSeed, Missed: b.Missed}
		}
		if d.Lost {
			answer["lost"] = true
			answer["lostNote"] = "no early join is known: the early set was first closed more than 10 s after the begin with nobody in it, " +
				"so joins made before the begin may have been lost with the live store; no place was given by a draw"
		}
		encoded, err := json.Marshal(answer)
		if err != nil {
			return core.Wrap("room draw", core.CodeInternal, err)
		}
		body, _ = a.draws.LoadOrStore(id, encoded)
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body.([]byte))
}

// roomMetrics are the rooms' series, per room voucher (few: a room is
// for a sale's big openings).
type roomMetrics struct {
	admitted       *prometheus.CounterVec
	waiting        *prometheus.GaugeVec
	noShows        *prometheus.GaugeVec
	soldOutSeconds *prometheus.GaugeVec
}

func newRoomMetrics(r *prometheus.Registry, queue string) *roomMetrics {
	labels := prometheus.Labels{"queue": queue}
	m := &roomMetrics{
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_room_admitted_total",
			Help: "Places a waiting room admitted, by this instance's admission passes.", ConstLabels: labels}, []string{"voucher"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_room_waiting",
			Help: "Places given in a waiting room and not yet admitted, at this instance's last pass.", ConstLabels: labels}, []string{"voucher"}),
		noShows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_room_no_shows",
			Help: "Admissions of a waiting room that lapsed unused, since its opening.", ConstLabels: labels}, []string{"voucher"}),
		soldOutSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_room_sold_out_timestamp_seconds",
			Help: "When a waiting room first found no unit left (unix seconds).", ConstLabels: labels}, []string{"voucher"}),
	}
	r.MustRegister(m.admitted, m.waiting, m.noShows, m.soldOutSeconds)
	return m
}

// RoomPassed implements room.Observer.
func (m *roomMetrics) RoomPassed(voucherID int64, p room.Progress) {
	v := strconv.FormatInt(voucherID, 10)
	m.admitted.WithLabelValues(v).Add(float64(p.Admitted))
	m.waiting.WithLabelValues(v).Set(float64(p.Waiting()))
	m.noShows.WithLabelValues(v).Set(float64(p.NoShows))
	if !p.SoldOutAt.IsZero() {
		m.soldOutSeconds.WithLabelValues(v).Set(float64(p.SoldOutAt.UnixMilli()) / 1000)
	}
}

// dashboardRoom is a waiting room on the dashboard: its size (places not
// yet admitted), how fast it admits, its no-shows and when it sold out.
type dashboardRoom struct {
	Voucher           int64      `json:"voucher"`
	Title             string     `json:"title"`
	Waiting           int64      `json:"waiting"`
	Admitted          int64      `json:"admitted"`
	AdmittedPerSecond float64    `json:"admittedPerSecond"`
	Rate              int        `json:"rate"`
	NoShows           int64      `json:"noShows"`
	SoldOutAt         *time.Time `json:"soldOutAt"`
}

// roomMark is a room's frontier at a snapshot.
type roomMark struct {
	frontier int64
	at       time.Time
}

// roomsNow reads the rooms' last passes; admitted per second is the
// frontier's move since the previous snapshot.
func (d *dashboard) roomsNow() []dashboardRoom {
	reports := d.src.roomReports()
	out := make([]dashboardRoom, 0, len(reports))
	marks := make(map[int64]roomMark, len(reports))
	for _, r := range reports {
		room := dashboardRoom{Voucher: r.Voucher.ID, Title: r.Voucher.Title, Waiting: r.Waiting(), Admitted: r.Frontier,
			Rate: r.Voucher.Room.AdmitPerSecond, NoShows: r.NoShows}
		if prev, ok := d.prevAdmitted[r.Voucher.ID]; ok && r.At.After(prev.at) {
			room.AdmittedPerSecond = float64(r.Frontier-prev.frontier) / r.At.Sub(prev.at).Seconds()
		}
		if !r.SoldOutAt.IsZero() {
			at := r.SoldOutAt.UTC()
			room.SoldOutAt = &at
		}
		marks[r.Voucher.ID] = roomMark{frontier: r.Frontier, at: r.At}
		out = append(out, room)
	}
	d.prevAdmitted = marks
	return out
}
