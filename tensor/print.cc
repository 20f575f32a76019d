// TODO(helper): implement
