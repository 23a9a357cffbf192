package server

import (
	"context"
	"math"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// mountConsumers mounts the operator's hold on the consumers: pause,
// resume, a cap, and the setting (GET).
func (a *steeringRoutes) mountConsumers(app *fiber.App, admin fiber.Handler) {
	app.Get("/api/admin/consumers", admin, a.consumerSetting)
	app.Post("/api/admin/consumers/pause", admin, a.consumers(a.steering.PauseConsumers))
	app.Post("/api/admin/consumers/resume", admin, a.consumers(a.steering.ResumeConsumers))
	app.Put("/api/admin/consumers/rate", admin, requireJSON, a.consumerRate)
}

// consumerJSON is the consumers' setting as the API answers it.
func consumerJSON(s core.ConsumerSetting) fiber.Map {
	return fiber.Map{"paused": s.Paused, "perSecond": s.PerSecond, "version": s.Version}
}

func (a *steeringRoutes) consumerSetting(c *fiber.Ctx) error {
	s, err := a.steering.Consumers(c.UserContext())
	if err != nil {
		return core.Wrap("the consumers' setting", core.CodeUnavailable, err)
	}
	return c.JSON(consumerJSON(s))
}

// consumers answers a pause or a resume once every instance runs it.
func (a *steeringRoutes) consumers(do func(context.Context, steer.Request) (core.ConsumerSetting, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := a.noted(c, a.operator)
		if err != nil {
			return err
		}
		s, err := do(c.UserContext(), r)
		if err != nil {
			return err
		}
		return c.JSON(consumerJSON(s))
	}
}

// consumerRate caps the orders persisted a second in all: {"perSecond": n,
// "note"} (0: no cap).
func (a *steeringRoutes) consumerRate(c *fiber.Ctx) error {
	var body struct {
		PerSecond *int64 `json:"perSecond"`
		Note      string `json:"note"`
	}
	r, err := a.operator(c, &body)
	if err != nil {
		return err
	}
	if err := checkNote(body.Note); err != nil {
		return err
	}
	if body.PerSecond == nil || *body.PerSecond < 0 || *body.PerSecond > math.MaxInt32 {
		return badRequest("perSecond is required: the orders persisted a second in all, 0 for no cap, at most %d", math.MaxInt32)
	}
	r.Note = body.Note
	s, err := a.steering.CapConsumers(c.UserContext(), r, int(*body.PerSecond))
	if err != nil {
		return err
	}
	return c.JSON(consumerJSON(s))
}
