"""Places: an event's cap split into shards (so one item never takes every write of an
opening), the arithmetic of moving a cap, and the inventory that stores them."""
