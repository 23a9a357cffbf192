package amqpqueue

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Remove deletes what the queue named queue made on the broker at url —
// the queue, its dead-letter queue and exchange, its roll-call exchange —
// so a test or the lab leaves nothing behind on a shared RabbitMQ.
// Missing ones are no error. The dead-letter queue is the default one
// (Config.DeadQueue unset).
func Remove(url, queue string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return fmt.Errorf("rabbitmq: connect: %w", err)
	}
	defer conn.Close()
	var errs []error
	// Each deletion on a channel of its own: a failed one closes it.
	each := func(what string, del func(ch *amqp.Channel) error) {
		ch, err := conn.Channel()
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer ch.Close()
		var ae *amqp.Error
		if err := del(ch); err != nil && !(errors.As(err, &ae) && ae.Code == amqp.NotFound) {
			errs = append(errs, fmt.Errorf("rabbitmq: delete %s: %w", what, err))
		}
	}
	dead := queue + "_dead"
	for _, q := range []string{queue, dead} {
		each(q, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
	}
	for _, x := range []string{dead, RollCallExchange(queue)} {
		each(x, func(ch *amqp.Channel) error { return ch.ExchangeDelete(x, false, false) })
	}
	return errors.Join(errs...)
}
