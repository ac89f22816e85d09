package mockapi
