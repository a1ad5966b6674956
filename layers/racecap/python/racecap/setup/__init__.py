"""A director's race set-up: drafts, patches, price tiers, copies of last year's race,
publishing and unpublishing, cap changes across shards."""
