-- public.checkins: Gowalla check-ins of 1,000 users (see SOURCE.txt), one row per check-in.
CREATE TABLE IF NOT EXISTS public.checkins (
    user_id integer NOT NULL,          -- the person who checked in: the privacy unit
    poi_id integer NOT NULL,           -- the place
    lat double precision NOT NULL,     -- the place's latitude (degrees)
    lon double precision NOT NULL,     -- the place's longitude (degrees)
    checkin_date date NOT NULL,        -- day of the check-in (UTC)
    hour integer NOT NULL              -- hour of the check-in, 0-23 (UTC)
);
